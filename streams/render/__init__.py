"""Output for people: text tables, one line per event, battery tables, PNG charts."""
