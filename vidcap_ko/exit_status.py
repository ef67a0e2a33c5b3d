"""The exit statuses a scheduler reads: those of `caption`, and of the commands that share them
(caption-meteor, caption-report and caption-export give the same numbers for the same endings).

    0    every (video, task, adapter) of the job ended `ok`
    1    an unexpected error inside vidcap-ko (a bug: the traceback says where)
    2    a bad config, or an `output` / summary file the job refuses to write; nothing ran
    3    the job finished, but some records are errors (or fail_fast stopped it at the first one), this
         run's or earlier runs' that it did not run again (retry_errors=true does)
    4    the inference engine did not load its model (the message says why), or died and could not be
         restarted; records written so far stay valid
    5    a file the job writes could not be written (disk full, read-only filesystem, permission
         denied, I/O error): the message names it; records written so far stay whole, re-run to resume
    6    another job is writing the same output (its pid, host and start are named); nothing ran
    7    the input cannot be read: the folder being captioned went away mid-run (unmounted, moved or
         deleted), or the object store of input_dir=s3://... does not answer or refuses the credentials
         (before anything ran, or mid-run): the job stopped without an error record for the clips it
         could not read; re-run once it is back to resume
    130  interrupted (SIGINT / SIGTERM); records written so far stay valid, re-run to resume
"""

EXIT_OK = 0
EXIT_BUG = 1
EXIT_USAGE = 2
EXIT_FAILED_RECORDS = 3
EXIT_ENGINE_DIED = 4
EXIT_WRITE_FAILED = 5
EXIT_OUTPUT_BUSY = 6
EXIT_INPUT_GONE = 7
EXIT_INTERRUPTED = 130
