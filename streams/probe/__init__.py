"""The probe side: a real probe agent (UDP echo mesh, NIC and TCP counters) and the batching producer SDK."""
