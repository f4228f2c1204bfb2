"""Paragraph strategy: layout-aware paragraph segmentation of PDFs (the paper's contribution)."""

from .segmenter import Paragraph, SegmenterConfig, segment_pdf
from .strategy import SPEC

__all__ = ["SPEC", "Paragraph", "SegmenterConfig", "segment_pdf"]
