"""Message, API and Arrow contracts of cnsched. Imports nothing of ours."""
