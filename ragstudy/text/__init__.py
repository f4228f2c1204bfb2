"""The text layer: PDF text with positions, its normalisation and cleaning, sentences, and the chunk records."""
