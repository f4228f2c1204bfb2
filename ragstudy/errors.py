"""User-facing errors: each names the file, row or flag at fault and says what to do."""


class StudyInputError(ValueError):
    """Bad input (documents, questions, config, model paths) that the user must fix before running."""
