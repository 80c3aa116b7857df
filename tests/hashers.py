"""A password hasher for the test process only (tests/settings.py)."""

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class OneIterationPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """Django's PBKDF2 with one iteration instead of a million (about half a second of CPU a hash
    on two shared cores, paid for every user a test makes and every password login). A hash keeps
    its iteration count (`pbkdf2_sha256$1$...`), so the processes a test starts on the project's
    own settings check it as they check any; a hash they make checks here too."""

    iterations = 1
