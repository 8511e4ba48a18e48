"""Training the small models a method needs (`mhindex train METHOD`): one module per method.

EfficientRAG's Labeler & Tagger and Filter are trained from a built corpus's gold question
decompositions (training/efficientrag.py); the models land under `<home>/models/<method>/` where
the method finds them.
"""
