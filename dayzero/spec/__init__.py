"""What is to be run, as data: matrix, typed model card, inventory, workloads, recipes, goldens.

Pure: nothing here touches a host.
"""
