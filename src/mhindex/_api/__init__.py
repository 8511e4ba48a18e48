"""What `import mhindex` offers, implemented over the same objects the command line uses.

Nothing here is public by its own path: `mhindex/__init__.py` exports the names (and lists them in
`__all__`), and this package may be rearranged behind them. The CLI calls these too, so a notebook and
`mhindex ask` run the same code: `corpora.py` (build, open, read and search corpora), `answering.py`
(ask one question or many), `evaluation.py` (run, score and read evaluations, write the report).
"""
