"""mhindex: multi-hop question answering over your own corpora.

The tree is the architecture: `corpora/` turns dataset releases into paragraph corpora,
`backends/` indexes and searches them, `lm/` completes prompts, `methods/` answer questions
with retrieval and reasoning, `eval/` scores them, and `cli/` is a thin layer over all of it.
"""

__version__ = "0.1.0"
