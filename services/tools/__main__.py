from livehost.service import main
from services.tools.server import build

if __name__ == "__main__":
    main(build)
