"""onnx-int8: the ONNX export quantized once to int8 (`onnxruntime.quantization.quantize_dynamic`, MatMul weights
per channel, the feed-forward output projections kept in float32: see onnx_embedder.ffn_outputs), ~1.2x float32's
speed; its vectors are keyed apart from float32 ones (VARIANT_OF)."""

from __future__ import annotations

from ragstudy.embedders import register_embedder
from ragstudy.embedders.onnx_embedder import OnnxEmbedder


@register_embedder
class OnnxInt8Embedder(OnnxEmbedder):
    name = "onnx-int8"
    description = "ONNX Runtime, dynamic int8, CPU"
    order = 2
    quantize = True
