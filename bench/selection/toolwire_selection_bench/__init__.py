"""Synthetic domains for the tool-selection evaluation (``bench/eval_selection.py``).

Four domains (geometry, finance, travel, office) of about ten orchestrator-activated tools
each, in groups of deliberately similar siblings, so that choosing the one right tool is hard.
The tools run deterministically from their parameters and touch nothing outside the process.
Load it as a plugin object: ``App.load(plugins=[toolwire_selection_bench.plugin])`` with
``bench/selection`` on ``sys.path``.
"""
