"""Every generator of committed data: the engine and NCCL catalogs, the overlay section.

Each is held current by a drift test; none runs on the compile or check path.
"""
