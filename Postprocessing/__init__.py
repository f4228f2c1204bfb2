"""Postprocessing of the study's outputs: automatic metrics, blinded review workbook, survey analysis."""
