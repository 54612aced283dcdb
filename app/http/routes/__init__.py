"""The server's routes, one module per family; each is an ``APIRouter`` that ``create_app`` includes."""
