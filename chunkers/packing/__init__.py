"""ingestd.chunkers.packing.packer."""
