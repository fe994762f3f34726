"""Benchmarks: `python -m trainer.benchmark SUB-COMMAND` (`__main__.py`), one module per
sub-command, their timing and statistics, and the JSON records they write. Kept free of
TensorFlow imports, so `trainer.benchmark.stats` loads with numpy alone."""
