"""Prolific: the researcher API client (`client.py`) and an offline emulator of that API (`emulator/`).

Prolific recruits and pays participants; the task itself runs on the campaign's own task site. The
emulator lets a whole Prolific campaign run offline, with simulated participants going through the
same reserve -> start -> study URL -> completion redirect -> review path that real people take.
"""
