"""The scheduler: state and decisions (state), the path table, migrations, message assembly (decision), its agent and history refresh."""
