"""Bandit environments. Importing this package registers the bundled kinds."""

from netsim.bandits.base import BanditEnvironment, bandits
from netsim.bandits.diabetes import DiabetesBandit
from netsim.bandits.linear import LinearBandit
from netsim.bandits.stochastic import BernoulliBandit, GaussianBandit, HeterogeneousBandit
from netsim.bandits.tabular import TabularBandit

__all__ = [
    "BanditEnvironment",
    "BernoulliBandit",
    "DiabetesBandit",
    "GaussianBandit",
    "HeterogeneousBandit",
    "LinearBandit",
    "TabularBandit",
    "bandits",
]
