"""The org cache as a daari instance uses it: tenants, the service's paths, the client (the service itself is
daari/org_service/)."""
