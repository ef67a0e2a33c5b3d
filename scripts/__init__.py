"""Developer tools: set-up (setup.sh, install_debian_packages.sh) and the METEOR golden files
(`python -m scripts.make_meteor_golden`, from the repository root). Not part of the installed package."""
