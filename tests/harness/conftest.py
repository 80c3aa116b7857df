import pytest

from registry.reruns.harness.session import sessions_close


@pytest.fixture
def fresh_sessions():
    """No warm child process before or after: for tests that change its environment."""
    sessions_close()
    yield
    sessions_close()


def geglu_spec(**changes):
    spec = {
        "kernel": "geglu",
        "provider": "huggingface",
        "operation_mode": "forward",
        "metric": "latency",
        "x_name": "T",
        "x_value": 64,
        "config": {
            "bsz": 2,
            "hidden_size": 128,
            "intermediate_size": 256,
            "hidden_act": "gelu_pytorch_tanh",
            "dtype": "torch.float32",
        },
        "device": "cpu",
    }
    spec.update(changes)
    return spec
