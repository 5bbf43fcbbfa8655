"""Audit documents for sink and store tests."""


def decision(task_id, at, nodes=("n1",)):
    return {"task_id": task_id, "status": "placed" if nodes else "unschedulable", "nodes": list(nodes),
            "alpha": 0.2, "network_profile": "bandwidth", "state_version": 3, "decided_at": at,
            "candidates": [{"node": "n1", "compute_score": 80.0, "network_score": 90.0, "alpha": 0.2, "composite": 88.0},
                           {"node": "n2", "compute_score": 100.0, "network_score": 40.0, "alpha": 0.2, "composite": 52.0}],
            "rejected": {"n3": "insufficient_cards"}, "rejected_counts": {"insufficient_cards": 1},
            "fallbacks": [], "compute_only_nodes": ["n2"]}
