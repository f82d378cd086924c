"""Side-by-side benchmark of rocketq against Redis Streams, RabbitMQ and NATS JetStream
(`rocketq bench peers`)."""
