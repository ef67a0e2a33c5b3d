"""The documentation's generated parts: reference tables from conf/ and the schemas, and benchmark
tables from the dated results files in docs/results/.

    python -m scripts.docsgen                 # regenerate docs/snippets/ and the README's headline table
    python -m scripts.docsgen --check         # exit 1, naming them, if any generated file is stale
    python -m scripts.docsgen record DIR --command "caption-bench NAME ..."   # file a benchmark run
    make docs                               # regenerate, then build the site (mkdocs build --strict)

Modules: build.py (what is generated, write and check), conf_reference.py and conf_yaml.py (the
configuration reference), reference_tables.py (tiers, quantization rule, model presets, sampling
presets, exit statuses, scale-out model), results.py (benchmark results and the headline table),
record.py (filing a run), markdown.py (tables).
"""
