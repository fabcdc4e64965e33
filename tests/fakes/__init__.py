"""In-memory fakes of the launcher's ports (service/ports.py): see README.md here."""
