"""The Responses API's own state: stored responses (previous_response_id, GET /v1/responses/{id})."""
