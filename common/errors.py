"""The root of every expected failure, shared by all layers so each edge catches one class."""

from __future__ import annotations


class ApplianceError(Exception):
    """Base of every expected failure in the appliance; messages carry no patient data."""


class ConfigError(ApplianceError):
    """A setting or profile name is wrong."""
