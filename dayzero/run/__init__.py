"""One cell run as small steps, from leased hosts to raw records and checks."""
