"""The Faust app, the Kafka plumbing, the embedded broker, the producer SDK and the CLI."""
