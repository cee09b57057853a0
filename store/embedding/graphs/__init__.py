"""ONNX graphs of a model: how each is made, checked against its reference, cached.

Owns the recipes (``recipes``), the graph of a BERT model built from its own files
(``bert``, ``bert_graph``) and its float64 reference (``bert_reference``), the export of
any other model through torch (``torch_export``), the offline export that checks a graph
(``onnx_export``) and the cache of made graphs (``onnx_cache``).
"""
