from podium.cli import app

app(prog_name="podium")
