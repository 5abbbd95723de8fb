"""Serving the explorer: process start-up, logging, sessions, and the served app for tests."""
