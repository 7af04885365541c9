import sys

from netsim.experiment.cli import main

sys.exit(main())
