# Autouse: each test of this folder runs without the developer's LOC_* variables.
from tests.loc_environment import no_loc_environment

__all__ = ["no_loc_environment"]
