//! What the console's endpoint and overview pages show, gathered from Kafka: endpoint
//! health from the attempt log, deliveries by status, DLQ inflow and consumer lag.
