"""The embedders that compute vectors in-process, and what the CPU can do for them.

Owns the ONNX backends at run time (``onnx`` over ``onnx_runtime``), OpenVINO
(``openvino``), sentence-transformers (``sentence_transformer``) and the CPU's features
(``cpu``). The backends' specs that load them stay in ``store/embedding/``.
"""
