"""Preparing data sets: `python -m trainer.prepare SOURCE` (`__main__.py`), one module per source.
A new converter is a module here with a `prepare(...)` that writes shards and dataset.json."""
