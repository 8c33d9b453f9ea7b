from livehost.service import main
from services.voice.server import build

if __name__ == "__main__":
    main(build)
