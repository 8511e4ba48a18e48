"""An example mhindex plug-in package: a method (`method.py`), a backend (`backend.py`) and an answer
metric (`metric.py`), each registered by an entry point in pyproject.toml and nowhere else."""
