"""What sets a machine up: the data home (``appliance init``), bulk data imports
(``appliance <area> import``) and the offline install bundle (``./build.sh bundle``).

Modules: ``home`` (create or update the data home), ``importers`` (the import drivers),
``bundle`` (the self-contained bundle an offline machine installs from).
"""
