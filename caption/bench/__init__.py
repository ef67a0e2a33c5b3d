"""`caption-bench`: the benchmarks a user reruns on new hardware, as subcommands over one harness
(caption/bench/harness.py): the real `caption` job in a fresh process, a composed config, a clip set, the
bench model, and results.json + results.md + results.png stamped with the machine they came from."""
