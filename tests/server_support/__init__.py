"""Helpers for the HTTP server and shared-session tests: a throwaway redis-server, server
processes on free loopback ports, and a test plugin with a clarifying tool."""
