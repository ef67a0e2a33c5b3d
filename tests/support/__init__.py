"""Helpers the tests run beside them: servers, forwarders, start-up pretences."""
