"""Delivery front-ends (demo, server) built on ``electra_detect.Detector``."""
