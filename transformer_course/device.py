"""Escolha do dispositivo, feita uma vez no topo de cada capítulo."""

from __future__ import annotations

import torch


def get_device(prefer: str | None = None) -> torch.device:
    """Devolve o dispositivo de cálculo: ``cuda`` se houver GPU, senão ``cpu``.

    Args:
        prefer: força um dispositivo (por exemplo ``"cpu"``); ``None`` escolhe sozinho.
    """
    if prefer is not None:
        return torch.device(prefer)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def seeded_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """Um ``torch.Generator`` com semente própria (nunca o gerador global)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator
