"""The HTTP front behind ``serve``: the FastAPI app, its request guard, routes and LanguageTool's API."""
