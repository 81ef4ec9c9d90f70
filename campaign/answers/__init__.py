"""Every answer out of the store, one row per answer per item (`campaign export NAME --answers`), with
people's identifiers pseudonymised, and a person's answers erased on request (`campaign forget`)."""
