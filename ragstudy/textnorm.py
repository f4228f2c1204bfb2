"""Text normalisation shared by the segmenter, the ground-truth checks and the chunk alignment."""

# Ligature code points that PDF text layers contain, and the letters they stand for.
LIGATURES: dict[str, str] = {
    "\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl", "\ufb05": "st", "\ufb06": "st",
}
